"""Reporting: figures and tables saved for the notebooks, plots, inspection, notebook helpers."""
