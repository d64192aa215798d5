"""Experiment runners: the no-download demo and the papers' reproductions (outside the kernels).

Each part has a module ``privpub.experiments.<part>`` with ``demo(rng) -> list[DemoRow]`` and
``reproduce(out_dir, *, quick, data_dir, rng) -> Path`` (the markdown summary it wrote).
"""
