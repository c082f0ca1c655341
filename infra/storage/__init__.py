"""Where the data lives: the S3 buckets, the EFS file system and its backup, and the DataSync task between them."""
