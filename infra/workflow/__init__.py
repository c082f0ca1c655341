"""The Step Functions workflow's constructs: the state machine and the Plan function that runs ``infra/plan_step``."""
