"""Internals of :mod:`mledger.report`: data loading, PNG drawing, charts and the HTML page."""
