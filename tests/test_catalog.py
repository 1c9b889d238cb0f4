"""The catalog that ``check --list`` and the command's arguments read (reports.catalog) says what the registry's claims
are: the same ids in the same order, sections and kinds of check, so that the light table and the claims cannot
drift apart; and ``check --list`` prints it as one aligned line per claim."""
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
