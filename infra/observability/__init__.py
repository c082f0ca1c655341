"""What users watch a run with: the dashboard, the alarms, job-failure notifications."""
