"""The Spark Structured Streaming job: echoes to windowed, mergeable HDR histograms.

Importing this package does not import pyspark; the job module (``streaming.job``) does.
"""
