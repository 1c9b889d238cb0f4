"""The catalog that ``check --list`` and the command's arguments read (reports.catalog) says what the registry's claims
are: the same ids in the same order, sections and kinds of check, so that the light table and the claims cannot
drift apart; and ``check --list`` prints it as one aligned line per claim."""
import pytest

from bma_verify.reports import catalog, cli, core, kernel_report
from bma_verify.reports.registry import CLAIMS


def test_the_catalog_names_every_registered_claim_with_its_section_and_kinds_of_check():
    registered = [(c.id, c.section, tuple(dict.fromkeys(k.kind for k in c.checks)))
                  for c in CLAIMS]
    assert registered == [(e.id, e.section, e.kinds) for e in catalog.CLAIM_INDEX]
    assert catalog.CLAIM_IDS == tuple(c.id for c in CLAIMS)


def test_each_claim_module_of_the_catalog_defines_that_claim():
    modules = {c.id: c for c in CLAIMS}
    for entry in catalog.CLAIM_INDEX:
        module = __import__(f"bma_verify.reports.claims.{entry.module}", fromlist=["CLAIM"])
        assert module.CLAIM is modules[entry.id], entry


def test_the_command_and_the_claims_share_the_tiers_devices_and_kernel_claims():
    assert (core.TIERS, core.DEVICES) == (catalog.TIERS, catalog.DEVICES)
    assert kernel_report.KERNEL_CLAIMS == catalog.KERNEL_CLAIMS
    assert set(catalog.KERNEL_CLAIMS) <= set(catalog.CLAIM_IDS)


def test_check_list_prints_one_aligned_line_per_claim_with_its_short_statement(capsys):
    assert cli.main(["check", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table, note = lines[:-1], lines[-1]
    assert table[0].split() == ["claim", "checks", "states"] and "--list --json" in note
    assert [line.split()[0] for line in table[1:]] == list(catalog.CLAIM_IDS)
    # the columns start where the header's do, on every line (footnote1-selective-induction is the longest id)
    kinds_at, states_at = table[0].index("checks"), table[0].index("states")
    for line, entry in zip(table[1:], catalog.CLAIM_INDEX):
        assert line[kinds_at:states_at].strip() == ", ".join(entry.kinds), line
        assert line[states_at:] == entry.short, line
        assert line[kinds_at - 2:kinds_at] == "  " and line[states_at - 2:states_at] == "  ", line


def test_each_short_statement_is_one_short_line():
    for entry in catalog.CLAIM_INDEX:
        assert "\n" not in entry.short and 20 <= len(entry.short) <= 70, entry


def _claim_folder(root, name, entry):
    """A claim folder ``root/name`` whose __init__.py holds ``entry`` (its claim.py is never imported here)."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(f"CATALOG_ENTRY = {entry!r}\n")
    (folder / "claim.py").write_text("raise AssertionError('the catalog must not import claim.py')\n")
    return folder


def test_a_claim_folder_of_ones_own_is_listed_after_the_claims_of_its_section(tmp_path, capsys):
    entry = {"id": "ext-catalog-probe", "section": "beyond", "kinds": ("exact",), "short": "a probe of the catalog"}
    _claim_folder(tmp_path, "ext_catalog_probe", entry)
    (tmp_path / "notes").mkdir()  # a folder without claim.py is not a claim folder
    index = catalog.claim_index(tmp_path)
    assert index[:-1] == catalog.CLAIM_INDEX
    assert index[-1] == catalog.ClaimEntry("ext-catalog-probe", "ext_catalog_probe.claim", "beyond", ("exact",),
                                           "a probe of the catalog")
    assert cli.main(["check", "--list", "--claims-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-2].split()[:3] == ["ext-catalog-probe", "exact", "a"]


def test_a_paper_claim_folder_is_listed_with_the_papers_claims(tmp_path):
    entry = {"id": "paper-catalog-probe", "section": "paper", "kinds": ("exact",), "short": "a probe"}
    _claim_folder(tmp_path, "paper_catalog_probe", entry)
    ids = [e.id for e in catalog.claim_index(tmp_path)]
    papers = sum(e.section == "paper" for e in catalog.CLAIM_INDEX)
    assert ids[papers] == "paper-catalog-probe" and ids[papers + 1:] == list(catalog.CLAIM_IDS[papers:])


def test_a_claim_folder_that_is_misnamed_or_lacks_its_entry_or_repeats_an_id_is_refused(tmp_path, capsys):
    good = {"id": "ext-probe-two", "section": "beyond", "kinds": ("exact",), "short": "a probe"}
    _claim_folder(tmp_path / "a", "ext_probe_wrong_name", good)
    with pytest.raises(ValueError, match="the claim id with '_' for '-'"):
        catalog.claim_index(tmp_path / "a")
    _claim_folder(tmp_path / "b", "ext_probe_three", {"id": "ext-probe-three", "section": "beyond"})
    with pytest.raises(ValueError, match="CATALOG_ENTRY = a dict with the keys id, section, kinds, short"):
        catalog.claim_index(tmp_path / "b")
    _claim_folder(tmp_path / "c", "lemma4_loglik_gap", dict(good, id="lemma4-loglik-gap"))
    with pytest.raises(ValueError, match="is taken by|lemma4-loglik-gap is defined twice"):  # the package claim wins
        catalog.claim_index(tmp_path / "c")
    assert cli.main(["check", "--list", "--claims-dir", str(tmp_path / "missing")]) == 2
    assert "--claims-dir" in capsys.readouterr().err
