"""`bma-verify check --kernel`: the kernel claims on a user's own kernel (reports.kernel_report)."""
import csv
import json
import math
import tracemalloc
import warnings

import numpy as np
import pytest

from bma_verify import numerics as nm
from bma_verify.numerics.dpi_sweep import lemma3_pairs, lemma4_terms
from bma_verify.reports import cli
from bma_verify.reports.io import load_kernels
from bma_verify.reports.kernel_report import check_kernel_claims, in_units, write_table
from bma_verify.reports.search import KNOWN_COUNTEREXAMPLES

THM3_INSTANCE = next(i for i in KNOWN_COUNTEREXAMPLES if i["target"] == "thm3")


def test_theorem3_on_the_stored_counterexample_kernel_holds_as_stated_and_refutes_the_exact_form():
    # Reference: the stored search instance (reports/search.py), whose exact π̄ gradients at h = 3 are
    # (0.0436, −0.0821, 0.0385): x_0 beats the true parent x_2, while the J form keeps the parent first.
    result = check_kernel_claims(THM3_INSTANCE["kernel"], claims=("thm3-init-gradient",),
                                 parents=THM3_INSTANCE["parents"], init=THM3_INSTANCE["init"])
    thm3 = result["claims"]["thm3-init-gradient"]
    assert thm3["verdict"] == "holds"  # the paper's statement (J form)
    finding = thm3["findings"][0]
    assert finding["status"] == "refuted" and finding["instance"]["h"] == 3
    row = next(r for r in thm3["rows"] if r["h"] == 3)
    expected = nm.init_gradient(np.array(THM3_INSTANCE["kernel"]), np.array(THM3_INSTANCE["parents"]), 3,
                                np.array(THM3_INSTANCE["init"]))
    assert row["exact_margin"] == pytest.approx(expected[2] - expected[:2].max(), abs=1e-12)


def test_lemma3_rows_equal_an_independent_pairwise_computation():
    # Reference: numerics.pairwise_joint + mutual_information pair by pair
    rng = np.random.default_rng(3)
    kernel = nm.random_kernel(3, eps=0.05, rng=rng)
    parents = np.array([-1, 0, 1, 1, 2])
    result = check_kernel_claims(kernel, claims=("lemma3-strict-dpi",), parents=parents)
    lemma3 = result["claims"]["lemma3-strict-dpi"]
    for row in lemma3["rows"]:
        h, k = row["h"], row["h_prime"]
        mi_c = nm.mutual_information(nm.pairwise_joint(kernel, parents, h, k))
        mi_p = nm.mutual_information(nm.pairwise_joint(kernel, parents, h, parents[h]))
        assert row["ratio"] == pytest.approx(mi_c / mi_p, rel=1e-9)
    assert lemma3["verdict"] == "holds" and lemma3["max_ratio"] < 1
    assert result["facts"]["eps"] == kernel.min() and result["facts"]["d_eps"] == pytest.approx(3 * kernel.min())


def test_a_zero_entry_is_said_plainly_and_leaks_no_warning():
    kernel = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = check_kernel_claims(kernel, parents=[-1, 0, 1, 1])
    for claim in ("lemma3-strict-dpi", "lemma4-loglik-gap", "thm2-consistency", "thm1-construction"):
        assert result["claims"][claim]["verdict"] == "not applicable"
        assert "zero entry" in result["claims"][claim]["why"]
    assert result["claims"]["thm3-init-gradient"]["verdict"] in ("holds", "fails")


@pytest.mark.parametrize("fmt", ["npy", "csv", "json"])
def test_cli_thm3_on_a_kernel_file_is_about_that_kernel(fmt, tmp_path, capsys):
    kernel = nm.random_kernel(3, eps=0.02, rng=np.random.default_rng(1))
    path = tmp_path / f"K.{fmt}"
    {"npy": lambda: np.save(path, kernel), "csv": lambda: np.savetxt(path, kernel, delimiter=","),
     "json": lambda: path.write_text(json.dumps(kernel.tolist()))}[fmt]()
    assert cli.main(["check", "thm3-init-gradient", "--kernel", str(path), "--init", "stationary", "--trees", "3"]) == 0
    out = capsys.readouterr().out
    assert f"ε = min π = {kernel.min():.4g}" in out and "thm3-init-gradient: holds" in out
    assert "stationary law" in out and "stored" not in out  # about K only, no stored-counterexample prose
    assert cli.main(["check", "--kernel", str(path), "--json", "--trees", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["kernels"][path.name]["claims"]) == {"lemma3-strict-dpi", "lemma4-loglik-gap",
                                                         "thm2-consistency", "thm3-init-gradient", "thm1-construction"}


def test_a_batch_of_100_kernels_gives_one_table(tmp_path, capsys):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "many.npz", **{f"k{i}": nm.random_kernel(3, eps=0.01, rng=rng) for i in range(100)})
    out = tmp_path / "table"
    assert cli.main(["check", "lemma3-strict-dpi", "thm3-init-gradient", "--kernel", str(tmp_path / "many.npz"),
                     "--trees", "2", "--H", "4", "--out", str(out)]) == 0
    rows = json.loads((out / "kernels.json").read_text())
    assert len(rows) == 100 and rows[0]["kernel"] == "k0"
    assert (out / "kernels.csv").read_text().count("\n") == 101
    # an existing table is never overwritten silently
    assert cli.main(["check", "lemma3-strict-dpi", "--kernel", str(tmp_path / "many.npz"), "--trees", "1",
                     "--H", "3", "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    with pytest.raises(FileExistsError):
        write_table([{"kernel": "x"}], out)


def test_kernel_input_errors(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no"):
        load_kernels(tmp_path / "empty")
    np.save(tmp_path / "K.npy", np.full((2, 2), 0.5))
    assert cli.main(["check", "exp-fig2-attention", "--kernel", str(tmp_path / "K.npy")]) == 2
    assert "not one" in capsys.readouterr().err
    assert cli.main(["check", "--kernel", str(tmp_path / "K.npy"), "--parents=-1,0,5"]) == 2
    assert "parents" in capsys.readouterr().err
    assert cli.main(["check", "--kernel", str(tmp_path / "K.npy"), "--init", "0.5,0.6"]) == 2
    assert "init" in capsys.readouterr().err


def test_units_bits_converts_the_information_quantities_and_nothing_else(tmp_path, capsys):
    # reference: mutual_information in bits = the nat value / ln 2 (dit's convention is bits: log base 2); ratios,
    # χ² quantities and the Hoeffding L do not depend on the base
    rng = np.random.default_rng(5)
    kernel = nm.random_kernel(3, eps=0.05, rng=rng)
    parents = np.array([-1, 0, 1, 1, 2])
    np.save(tmp_path / "k.npy", kernel)
    args = ["check", "--kernel", str(tmp_path / "k.npy"), "--parents=-1,0,1,1,2", "--json"]
    assert cli.main(args) == 0
    nats = next(iter(json.loads(capsys.readouterr().out)["kernels"].values()))
    assert cli.main(args + ["--units", "bits"]) == 0
    bits = next(iter(json.loads(capsys.readouterr().out)["kernels"].values()))
    assert (nats["units"], bits["units"]) == ("nats", "bits")
    row_n, row_b = nats["claims"]["lemma3-strict-dpi"]["rows"][0], bits["claims"]["lemma3-strict-dpi"]["rows"][0]
    mi_bits = nm.mutual_information(nm.pairwise_joint(kernel, parents, row_b["h"], parents[row_b["h"]])) / math.log(2)
    assert row_b["mi_parent"] == pytest.approx(mi_bits, rel=1e-12)
    assert row_b["loglik_gap"] == pytest.approx(row_n["loglik_gap"] / math.log(2), rel=1e-12)
    assert row_b["ratio"] == row_n["ratio"]
    assert bits["claims"]["lemma4-loglik-gap"]["min_gap"] == pytest.approx(
        nats["claims"]["lemma4-loglik-gap"]["min_gap"] / math.log(2), rel=1e-12)
    assert bits["claims"]["thm2-consistency"]["max_L_for_error_0.05"] == pytest.approx(
        nats["claims"]["thm2-consistency"]["max_L_for_error_0.05"], rel=1e-9)
    assert bits["claims"]["thm3-init-gradient"]["rows"] == nats["claims"]["thm3-init-gradient"]["rows"]
    assert cli.main(args[:-1] + ["--units", "bits", "--rows"]) == 0
    assert "(I in bits, ratio unit-free)" in capsys.readouterr().out
    assert cli.main(["check", "lemma3-strict-dpi", "--units", "bits"]) == 2
    assert "--units applies with --kernel only" in capsys.readouterr().err


def test_units_bits_scales_a_row_shared_with_a_finding_once():
    # a refuted finding's instance is the swept row itself: in bits it must equal that row, each scaled once
    # (reference: the nat result divided by ln 2)
    known = next(i for i in KNOWN_COUNTEREXAMPLES if i["target"] == "lemma3" and len(i["parents"]) == 3)  # δ(π)
    nats = check_kernel_claims(known["kernel"], claims=("lemma3-strict-dpi",), parents=known["parents"],
                               init=known["init"])
    finding = next(f for f in nats["claims"]["lemma3-strict-dpi"]["findings"] if f["status"] == "refuted")
    bits = in_units(nats, "bits")
    refuted = next(f for f in bits["claims"]["lemma3-strict-dpi"]["findings"] if f["status"] == "refuted")
    assert refuted["instance"]["mi_parent"] == pytest.approx(finding["instance"]["mi_parent"] / math.log(2),
                                                             rel=1e-12)
    row = next(x for x in bits["claims"]["lemma3-strict-dpi"]["rows"]
               if (x["h"], x["h_prime"]) == (refuted["instance"]["h"], refuted["instance"]["h_prime"]))
    assert row["mi_candidate"] == pytest.approx(finding["instance"]["mi_candidate"] / math.log(2), rel=1e-12)


def test_a_uniform_kernel_reads_no_information_for_every_claim_and_exits_0(tmp_path, capsys):
    # the uniform 2×2 kernel once read "lemma4 fails, smallest gap -1.11e-16" and exited 1
    np.save(tmp_path / "uniform.npy", np.full((2, 2), 0.5))
    assert cli.main(["check", "--kernel", str(tmp_path / "uniform.npy"), "--trees", "2"]) == 0
    out = capsys.readouterr().out
    for claim in ("lemma3-strict-dpi", "lemma4-loglik-gap", "thm2-consistency", "thm3-init-gradient",
                  "thm1-construction"):
        assert f"{claim}: not applicable (no information" in out
    assert "fails" not in out and "|gap| ≤ 1e-12 nats is a tie" in out  # the tolerance is printed


def test_a_nearly_uniform_kernel_gives_ties_not_failures():
    # δ(π) = 1e-9: informative, but every gap and gradient margin is ~1e-18, within the tie tolerance.
    # Reference: lemma4_terms on the pairwise joints confirms each gap is that small.
    kernel = np.array([[0.5, 0.5], [0.5 + 1e-9, 0.5 - 1e-9]])
    parents = [-1, 0, 1, 1, 2]
    result = check_kernel_claims(kernel, parents=parents)
    pairs = lemma3_pairs(kernel, parents)
    gaps = lemma4_terms(kernel, pairs["joint_parent_child"], pairs["joint_candidate_child"])["lhs"]
    assert np.abs(gaps).max() <= 1e-12
    verdicts = {c: r["verdict"] for c, r in result["claims"].items()}
    assert "fails" not in verdicts.values()
    assert result["claims"]["lemma4-loglik-gap"]["why"] == "every pair is a tie: |gap| ≤ 1e-12 nats"
    assert result["claims"]["thm3-init-gradient"]["why"].startswith("every position is a tie")
    assert verdicts["thm1-construction"] == "holds"


def test_a_d300_kernel_gets_a_theorem3_verdict_with_its_method():
    # reference: numerics.approximate_init_gradient (pairwise joints by matrix powers) for the J form
    rng = np.random.default_rng(300)
    kernel = rng.dirichlet(np.full(300, 0.5), size=300)
    thm3 = check_kernel_claims(kernel, claims=("thm3-init-gradient",), parents=[-1, 0, 1])["claims"][
        "thm3-init-gradient"]
    assert thm3["verdict"] == "holds" and "Monte Carlo" in thm3["method"] and thm3["positions"] == 1
    expected = nm.approximate_init_gradient(kernel, np.array([-1, 0, 1]), 2)
    assert thm3["worst"]["value"] == pytest.approx(expected.tolist(), abs=1e-12)
    assert thm3["worst"]["margin"] == pytest.approx(expected[1] - expected[0], abs=1e-12)
    assert thm3["rows"][0]["exact_samples"] > 0 and thm3["rows"][0]["exact_margin_stderr"] > 0


def test_a_d3000_kernel_is_refused_before_allocating(tmp_path, capsys):
    # d = 3000 once died allocating a 201 GiB (d, d, d) array; now refused first, in one line, exit 2
    kernel = np.random.default_rng(0).dirichlet(np.ones(3000), size=3000)
    tracemalloc.start()
    with pytest.raises(ValueError, match="d = 3000 states"):
        check_kernel_claims(kernel, claims=("thm3-init-gradient",), trees=1, H=3)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2 * kernel.nbytes
    np.save(tmp_path / "d3000.npy", kernel)
    assert cli.main(["check", "--kernel", str(tmp_path / "d3000.npy")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "d = 3000" in err and "too many states at any --H" in err


def test_one_kernel_prints_a_summary_and_its_rows_only_with_rows(tmp_path, capsys):
    kernel = nm.random_kernel(3, eps=0.02, rng=np.random.default_rng(2))
    np.save(tmp_path / "K.npy", kernel)
    args = ["check", "lemma3-strict-dpi", "thm3-init-gradient", "--kernel", str(tmp_path / "K.npy"), "--trees", "1",
            "--H", "40"]
    assert cli.main(args) == 0
    summary = capsys.readouterr().out
    assert len(summary.splitlines()) < 40  # a summary (wrapped within 100 columns), not a line per swept row
    assert max(len(line) for line in summary.splitlines()) <= 100 and "(id " not in summary  # one kernel: no id
    assert summary.count("worst case at") == 2 and summary.count("  margin: ") == 2 and "(unit-free)" in summary
    assert "E g(pa) − max over h' ≠ pa of E g(h')" in summary  # thm3's margin is defined where it is printed
    assert cli.main(args + ["--rows"]) == 0
    assert len(capsys.readouterr().out.splitlines()) > 39 * 38 // 2  # every (tree, pair) row of Lemma 3


def test_the_kernel_table_carries_the_worst_numbers(tmp_path):
    # references: lemma3_pairs (ratio of every pair) and approximate_init_gradient (the J form), per kernel
    rng = np.random.default_rng(7)
    kernels = {f"k{i}": nm.random_kernel(3, alpha=0.5, eps=0.01, rng=rng) for i in range(3)}
    np.savez(tmp_path / "many.npz", **kernels)
    parents = np.array([-1, 0, 0, 1, 2, 3])
    assert cli.main(["check", "lemma3-strict-dpi", "thm3-init-gradient", "--kernel", str(tmp_path / "many.npz"),
                     "--parents=-1,0,0,1,2,3", "--out", str(tmp_path / "out")]) == 0
    for row in json.loads((tmp_path / "out" / "kernels.json").read_text()):
        kernel = kernels[row["kernel"]]
        pairs = lemma3_pairs(kernel, parents)
        best = int(np.nanargmax(pairs["ratio"]))
        assert row["lemma3_max_ratio"] == pytest.approx(pairs["ratio"][best], rel=1e-9)
        assert row["lemma3_pair"] == (f"tree = 0, h = {pairs['h'][best]}, h' = {pairs['h_prime'][best]}, "
                                      f"pa = {pairs['parent'][best]}")
        h = int(row["thm3_position"].split("h = ")[1])
        gradient = nm.approximate_init_gradient(kernel, parents, h)
        assert row["thm3_gradient_nats"] == pytest.approx(gradient.tolist(), abs=1e-12)  # a JSON array
        assert row["thm3_parent"] == parents[h]
        assert row["thm3_margin_nats"] == pytest.approx(gradient[parents[h]] - np.delete(gradient, parents[h]).max(),
                                                        abs=1e-12)


def test_a_batch_prints_a_table_within_100_columns_and_its_json_keeps_gradients_as_arrays(tmp_path, capsys):
    # long kernel names and every kernel claim: the widest table there is; a kernel with a zero entry shows n/a
    rng = np.random.default_rng(3)
    kernels = {f"a_kernel_with_a_long_name_from_some_experiment_{i}": nm.random_kernel(3, eps=0.01, rng=rng)
               for i in range(2)}
    kernels["zero"] = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.3, 0.3, 0.4]])
    np.savez(tmp_path / "many.npz", **kernels)
    args = ["check", "--kernel", str(tmp_path / "many.npz"), "--trees", "1", "--H", "4"]
    assert cli.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)  # every kernel's text and the table
    table = lines[next(i for i, line in enumerate(lines) if line.split()[:3] == ["id", "kernel", "d"]):]
    assert table[0].split() == ["id", "kernel", "d", "min", "π", "δ(π)", "lemma3", "ratio", "lemma4", "thm2", "thm3",
                                "margin", "thm1"]
    assert table[3].split()[:3] == ["3", "zero", "3"] and table[3].split()[5] == "n/a"  # lemma3 needs π ≥ ε > 0
    # the id numbers the kernels as their blocks above do; long names sharing a prefix stay told apart
    for kernel_id, name in enumerate(kernels, start=1):
        row = table[kernel_id].split()
        assert row[0] == str(kernel_id)
        assert any(line.startswith(f"kernel {name} (id {kernel_id}): ") for line in lines)
        assert name == "zero" or (row[1].startswith("a_kernel") and row[1].endswith(f"_{kernel_id - 1}")), row
    assert cli.main(args + ["--json", "--out", str(tmp_path / "out")]) == 0
    rows = json.loads(capsys.readouterr().out)["table"]
    for row in rows:  # the gradients E g(h'), h' = 0..h−1, at Theorem 3's worst position: an array of numbers
        assert isinstance(row["thm3_gradient_nats"], list) and len(row["thm3_gradient_nats"]) >= 2
        assert all(isinstance(g, float) for g in row["thm3_gradient_nats"])
    assert json.loads((tmp_path / "out" / "kernels.json").read_text()) == rows
    with (tmp_path / "out" / "kernels.csv").open() as f:  # in the CSV, the same array as one JSON cell
        assert [json.loads(r["thm3_gradient_nats"]) for r in csv.DictReader(f)] == [r["thm3_gradient_nats"]
                                                                                    for r in rows]


J_FORM_INSTANCE = next(i for i in KNOWN_COUNTEREXAMPLES if i["target"] == "thm3" and i["form"] == "approximate")


def test_check_kernel_reports_what_holds_instead_where_the_j_form_fails(tmp_path, capsys):
    # the user's kernel and μ₀ are the known J-form counterexample, written to files: the J form fails there; the
    # repaired statement (the J form under the kernel's stationary law) holds, its margin compared against
    # J(pa) − max J(h') from numerics.gradient.chi2_gain (a second formula: pairwise joints, not kernel powers)
    kernel_path, init_path = tmp_path / "K.json", tmp_path / "mu0.json"
    kernel_path.write_text(json.dumps(J_FORM_INSTANCE["kernel"]))
    init_path.write_text(json.dumps(J_FORM_INSTANCE["init"]))
    assert cli.main(["check", "thm3-init-gradient", "--kernel", str(kernel_path), "--init", str(init_path),
                     "--parents", "-1,0,1", "--json"]) == 1
    thm3 = json.loads(capsys.readouterr().out)["kernels"]["K.json"]["claims"]["thm3-init-gradient"]
    assert thm3["verdict"] == "fails"
    repair = thm3["holds_instead"]
    assert repair["verdict"] == "holds" and repair["proved"] and repair["violations"] == 0
    kernel = np.array(J_FORM_INSTANCE["kernel"])
    gains = nm.chi2_gain(kernel, np.array([-1, 0, 1]), 2, nm.stationary_distribution(kernel))
    assert repair["worst"]["margin"] == pytest.approx((gains[1] - gains[0]) / 2, abs=1e-12)  # (1/h)·(J(pa) − J(x_0))
    assert cli.main(["check", "thm3-init-gradient", "--kernel", str(kernel_path), "--init", str(init_path),
                     "--parents", "-1,0,1"]) == 1
    out = capsys.readouterr().out
    assert "thm3-init-gradient: fails" in out and "what holds instead: the J form under this kernel's stationary law" in out
    assert f"= {repair['worst']['margin']:.4g}" in out


def test_check_kernel_reports_no_repair_where_the_j_form_holds():
    # the control: under the stationary law the claim holds, so there is nothing to repair
    result = check_kernel_claims(J_FORM_INSTANCE["kernel"], claims=("thm3-init-gradient",), parents=[-1, 0, 1])
    thm3 = result["claims"]["thm3-init-gradient"]
    assert thm3["verdict"] == "holds" and "holds_instead" not in thm3
