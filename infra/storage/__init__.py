"""Where the data lives: the S3 buckets, the EFS file system (a cache), and the DataSync task between them."""
