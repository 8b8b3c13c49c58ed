"""A real Kubernetes control plane for the chart's install tests: pinned, built once, cached."""
