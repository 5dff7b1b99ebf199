"""Training loops: one SimCLR loop (``weince.train.simclr``) for every image data set,
backbone and loss, and one unsupervised SimCSE loop (``weince.train.simcse``)."""
