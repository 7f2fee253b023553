"""Real text for a pretrained LM: the paper's GSM8K and HH-RLHF designs, split three ways (train, validation,
reported) so that sizes and levers are chosen on validation and never on what is reported."""
