"""GPUFramebufferUsageHigh against vLLM's preallocation: with the threshold README.md documents for a
given --gpu-memory-utilization, a healthy serving GPU does not fire; with the default it would."""

from __future__ import annotations

import pytest

# An H100 80GB as dcgm-exporter reports it (servewatch_testkit/synth/dcgm.py): 81559 MiB in all, 573
# reserved by the driver, so used + free is 80986 MiB.
TOTAL_MIB, RESERVED_MIB = 81559, 573


def documented_threshold(utilization: float) -> float:
    """README.md, "GPU memory against vLLM's preallocation": U + 0.03, at most 0.99."""
    return min(0.99, round(utilization + 0.03, 6))


def _scenario(used: int, free: int) -> str:
    labels = 'UUID="GPU-prealloc", gpu="0", Hostname="node-p", exported_namespace="llm", exported_pod="ds-0"'
    return f"""
scenarios:
  - name: healthy GPU after vLLM preallocation
    alert: GPUFramebufferUsageHigh
    series:
      - {{series: 'DCGM_FI_DEV_FB_USED{{{labels}}}', values: '{used}x40'}}
      - {{series: 'DCGM_FI_DEV_FB_FREE{{{labels}}}', values: '{free}x40'}}
    expect:
      - {{at: 30m, firing: []}}
"""


def test_the_readme_gives_the_rule(repo):
    text = (repo / "README.md").read_text()
    assert "Set the threshold to U + 0.03, at most 0.99" in text
    assert "GPUFramebufferUsageHigh: {threshold: 0.98}" in text  # the example follows the rule for 0.95


@pytest.fixture
def specs_copy(specs_with):
    return specs_with()


@pytest.mark.tools("promtool")
@pytest.mark.parametrize("utilization", [0.9, 0.92, 0.95])
def test_a_healthy_preallocated_gpu_does_not_fire_with_the_documented_threshold(
    specs_copy, tmp_path, servewatch, utilization
):
    used = round(utilization * TOTAL_MIB)  # vLLM's share of the whole device, what nvidia-smi shows
    free = TOTAL_MIB - RESERVED_MIB - used
    (specs_copy / "scenarios" / "prealloc.yaml").write_text(_scenario(used, free))
    (specs_copy / "overrides.yaml").write_text(
        "overrides:\n  alerts:\n"
        f"    GPUFramebufferUsageHigh: {{threshold: {documented_threshold(utilization)}}}\n"
    )
    out = tmp_path / "out"
    assert servewatch("generate", "--specs", specs_copy, "--out", out).returncode == 0
    res = servewatch("test", "--specs", specs_copy, "--out", out, "--extra", tmp_path / "none")
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.tools("promtool")
def test_the_default_threshold_fires_on_a_gpu_preallocated_at_095(specs_copy, tmp_path, servewatch):
    """Why the setting matters: 0.95 of an H100 is 0.957 of what can be allocated, above 0.95."""
    used = round(0.95 * TOTAL_MIB)
    (specs_copy / "scenarios" / "prealloc.yaml").write_text(_scenario(used, TOTAL_MIB - RESERVED_MIB - used))
    out = tmp_path / "out"
    assert servewatch("generate", "--specs", specs_copy, "--out", out).returncode == 0
    res = servewatch("test", "--specs", specs_copy, "--out", out, "--extra", tmp_path / "none")
    assert res.returncode == 1
    assert "healthy GPU after vLLM preallocation" in res.stdout
