"""Backbones and projection heads (``weince.models.vision``) and text encoders
(``weince.models.text``)."""
