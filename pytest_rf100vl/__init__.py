"""pytest plugin that turns each (model, dataset) pair of RF100-VL and UOUO into a test."""
