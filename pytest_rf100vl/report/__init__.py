"""Reporting: the common row columns (:mod:`.rows`), thresholds (:mod:`.thresholds`), checks of
means (:mod:`.checks`), the results folder (:mod:`.results_folder`) and the summary (:mod:`.summary`)."""
