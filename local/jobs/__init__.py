"""A local emulation of the SageMaker job contract: ``/opt/ml`` folders, channels, hosts as processes."""
