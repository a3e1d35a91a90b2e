"""mini-ptx-agent: the PTXBench kernel agent, built on mini-swe-agent."""

__version__ = "0.1.0"
