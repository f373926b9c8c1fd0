"""PromQL: builders that make expressions and a linter that reads them back."""
