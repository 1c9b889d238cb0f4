"""`bma-verify check --kernel`: the kernel claims on a user's own kernel (reports.kernel_report)."""
import json
import math
import warnings

import numpy as np
import pytest

from bma_verify import numerics as nm
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
    assert "(I in bits)" in capsys.readouterr().out
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
