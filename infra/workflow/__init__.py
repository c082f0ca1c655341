"""The Step Functions workflow: execution input, request builders, the Plan function and the state machine.

Everything here except ``state_machine.py`` and the constructs is plain Python (standard library only),
so the Plan Lambda function can import it and tests can call it without synthesizing anything.
"""
