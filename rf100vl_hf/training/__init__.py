"""Fine-tuning: recipes, checkpoints, the training loop and the regimes' pieces (federated loss, STAC)."""
