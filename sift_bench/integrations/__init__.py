"""Sifting inside other training loops: Hugging Face `Trainer` (`transformers`) and Lightning (`lightning`)."""
