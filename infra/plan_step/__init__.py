"""The Plan step's run-time code: the Lambda function the state machine's Plan state invokes.

It validates the execution input (``execution_input.py``), names the jobs (``names.py``) and builds every
SageMaker request (``requests.py``, ``processing_requests.py``, ``debugger.py``, ``metric_definitions.py``);
``plan.py`` holds the handler. Standard library only, with infra's stdlib-only modules that
``infra/workflow/plan_function.py`` bundles beside this folder; it never imports CDK (``tests/test_boundaries.py``),
so tests call it without a synth.
"""
