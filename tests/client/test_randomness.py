"""The SDK's device randomness: ChaCha20 keyed from the OS CSPRNG by default, never a seeded PCG64."""

from __future__ import annotations

import numpy as np
import pytest

import privpub.client._perturb as perturb_mod
from privpub.client import Participant, device_generator, perturb_values
from privpub.client._randomness import device_rng

CFG = {"kind": "frequency", "epsilon": 1.0, "oracle": "OUE", "categories": ["a", "b", "c"],
       "payload": {"layout": "bits", "bytes": 1}}


def test_device_generator_is_chacha20_and_fresh() -> None:
    g1, g2 = device_generator(), device_generator()
    assert type(g1.bit_generator).__name__ == "ChaCha"
    assert g1.bit_generator.state["state"]["rounds"] == 20
    # keyed independently: 2**-256 chance of equal streams
    assert not np.array_equal(g1.bit_generator.random_raw(4), g2.bit_generator.random_raw(4))
    assert all(type(c.bit_generator).__name__ == "ChaCha" for c in g1.spawn(3))


def test_default_perturbation_never_uses_a_seeded_pcg64(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real = perturb_mod.device_rng

    def spy(rng: object) -> np.random.Generator:
        gen = real(rng)
        made.append(type(gen.bit_generator).__name__)
        return gen

    def no_pcg64(*args: object, **kwargs: object) -> None:
        raise AssertionError("the default device path created a PCG64 generator")

    p = Participant("http://127.0.0.1:9", "c")  # (its back-off jitter is a PCG64: no privacy role)
    monkeypatch.setattr(perturb_mod, "device_rng", spy)
    monkeypatch.setattr(np.random, "PCG64", no_pcg64)
    monkeypatch.setattr(np.random, "default_rng", no_pcg64)
    out = perturb_values(CFG, ["a", "b", "c", "a"])  # rng defaults to "secure"
    assert out.shape == (4, 1) and made == ["ChaCha"]
    # a participant keys a fresh stream for every report (no long-lived stream links them)
    assert p._gen is None
    g1, g2 = p._coins(), p._coins()
    assert g1 is not g2 and type(g1.bit_generator).__name__ == "ChaCha"


def test_seeded_generators_stay_reproducible_for_simulations() -> None:
    a = perturb_values(CFG, ["a"] * 50, rng=7)
    b = perturb_values(CFG, ["a"] * 50, rng=7)
    assert np.array_equal(a, b)
    assert type(device_rng(3).bit_generator).__name__ == "PCG64"
    assert Participant("http://127.0.0.1:9", "c", rng=1)._gen is not None


def test_secure_reports_follow_the_exact_oue_probabilities() -> None:
    # the dyadic sampler reads raw ChaCha words: P[own bit] = 1/2, P[other bit] = q exactly
    from privpub.ldp import OUE

    n = 20_000
    bits = np.unpackbits(perturb_values(CFG, ["a"] * n), axis=1, bitorder="little")[:, :3]
    p, q = OUE(domain_size=3).probabilities(1.0)
    for j, prob in enumerate((p, q, q)):
        sd = np.sqrt(n * prob * (1 - prob))
        assert abs(bits[:, j].sum() - n * prob) < 5 * sd
