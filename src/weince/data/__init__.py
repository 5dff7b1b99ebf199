"""Data sets (vision: ``weince.data.vision``; text: ``weince.data.text``) and SimCLR
augmentations (``weince.data.augment``)."""
