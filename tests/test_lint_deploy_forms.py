"""servewatch lint on the deployment forms generate writes: the Helm values' rules are linted like any
rule file, kustomizations are known and skipped, so `servewatch lint rules dashboards` stays clean."""

import json

VALUES = "rules/helm/kube-prometheus-stack.values.yaml"


def test_lint_reads_the_rules_in_helm_values(tmp_path, repo, servewatch, line_of):
    text = (repo / VALUES).read_text()
    clean = json.loads(servewatch("lint", repo / VALUES, "--format", "json").stdout)
    assert clean["findings"] == [] and clean["summary"]["rules"] == text.count("- record:") + text.count(
        "- alert:"
    )
    stale = "vllm:gpu_cache_usage_perc"  # removed in vLLM 0.12
    bad = tmp_path / "values.yaml"
    bad.write_text(text.replace("expr: engine:vllm_kv_cache_usage:max > 0.95", f"expr: {stale} > 0.95", 1))
    res = servewatch("lint", bad, "--format", "json")
    assert res.returncode == 1
    (finding,) = json.loads(res.stdout)["findings"]
    assert finding["file"] == str(bad) and finding["line"] == line_of(bad, stale)


def test_lint_skips_kustomizations_and_names_them(repo, servewatch):
    paths = ["rules/kubernetes/kustomization.yaml", "dashboards/kubernetes/sidecar/kustomization.yaml"]
    res = servewatch("lint", *paths, "--format", "json")
    assert res.returncode == 0, res.stdout
    skipped = {(s["file"], s["what"]) for s in json.loads(res.stdout)["skipped"]}
    assert skipped == {(paths[0], "kustomize Kustomization"), (paths[1], "kustomize Component")}
