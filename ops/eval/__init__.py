"""Evaluation: the classifier, Frechet distance, `ddm eval`'s generate-and-score, and the data a trained
router is scored on."""
