"""Backbones and projection heads (``weince.models.vision``) and text encoders
(``weince.models.text``)."""
from weince.models.vision import (
    BACKBONES,
    ProjectionHead,
    SimCLRModel,
    build_backbone,
    build_simclr_model,
    load_encoder,
    register_backbone,
    save_encoder,
)

__all__ = ["BACKBONES", "ProjectionHead", "SimCLRModel", "build_backbone",
           "build_simclr_model", "load_encoder", "register_backbone", "save_encoder"]
