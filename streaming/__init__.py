"""The Spark Structured Streaming job: echoes to windowed, mergeable HDR histograms."""
