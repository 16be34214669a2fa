"""reportgen: a static website of findings about the attention heads of a BERT-family model."""

__version__ = "0.1.0"
