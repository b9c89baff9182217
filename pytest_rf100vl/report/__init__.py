"""Reporting: the common row columns (:mod:`.rows`), thresholds (:mod:`.thresholds`), pass/fail
from failed images (:mod:`.verdict`), checks of means (:mod:`.checks`), the results folder
(:mod:`.results_folder`), the summary (:mod:`.summary`) and Hub publishing (:mod:`.publish`)."""
