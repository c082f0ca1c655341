"""The Plan step's run-time code: the Lambda function the state machine's Plan state invokes.

It validates the execution input (``execution_input.py``), names the jobs (``names.py``), derives, checks and
encodes the training job's hyperparameters (``hyperparameters.py``) and builds every SageMaker request
(``requests.py``, ``processing_requests.py``, ``debugger.py``, ``metric_definitions.py``); ``plan.py`` holds the
handler and ``check_input``, the checks that need no object store (``python -m cli validate`` runs them too).
Standard library only, with infra's stdlib-only modules that ``infra/workflow/plan_function.py`` bundles beside
this folder; it never imports CDK (``tests/test_boundaries.py``), so tests call it without a synth.
"""
