"""Every way a result is shown: text tables and JSON dicts (text, measured, plan), figures (plots) and
the HTML report page (html). Nothing here computes a model number."""
