# C9 special-case check, each claim's table (one job per claim, reading that claim's inputs
# alone and writing that claim's files alone: `snakemake reports/<profile>/table_c3.md` plans
# only C3's runs; each verdict computed once, into the claim's file
# reports/<profile>/claims/<id>.json), and the summary with its figures, built from those
# files.
# `snakemake --report reports/<profile>/report.html --configfile ...` gathers the outputs
# marked with report() below, one category per claim (captions: workflow/report/*.rst).

from weince.report.html import (
    COMPANION_CATEGORY,
    SUMMARY_CATEGORY,
    claim_categories,
    figure_category,
    figure_subcategory,
)


report: "../report/workflow.rst"


CLAIM_CATEGORIES = claim_categories(PROFILE.claims)


rule special_case:
    output:
        f"{CHECKS_DIR}/special_case.json",
    log:
        f"{LOGS}/special_case.log",
    benchmark:
        f"{BENCH}/special_case.tsv"
    threads: 1
    resources:
        **resources_for("special_case"),
    params:
        cases=list(PROFILE.checks.cases),
    script:
        "../scripts/special_case.py"


rule claim_tables:
    input:
        claim_table_inputs,
        claims=str(PROFILE.claims),
    output:
        md=f"{REPORT_DIR}/table_{{cid}}.md",
        tex=f"{REPORT_DIR}/table_{{cid}}.tex",
        json=f"{REPORT_DIR}/claims/{{cid}}.json",
        html=report(
            f"{REPORT_DIR}/html/claim_{{cid}}.html",
            caption="../report/claim.rst",
            category=lambda wc: CLAIM_CATEGORIES.get(wc.cid.upper(), wc.cid.upper()),
            subcategory="table and forest plot",
            labels=lambda wc: {"claim": wc.cid.upper(), "page": "table"},
        ),
        forest=directory(FOREST_DIR),
    log:
        f"{LOGS}/claim_tables/{{cid}}.log",
    benchmark:
        f"{BENCH}/claim_tables/{{cid}}.tsv"
    wildcard_constraints:
        cid="|".join(CLAIM_IDS),
    threads: 1
    resources:
        **resources_for("report"),
    script:
        "../scripts/claim_tables.py"


rule report:
    input:
        report_inputs,
        claims=str(PROFILE.claims),
        forests=forest_dirs,
        companions=[str(p) for p in companion_targets(PROFILE)],
    output:
        summary=f"{REPORT_DIR}/summary.md",
        claims_json=f"{REPORT_DIR}/claims.json",
        tables_tex=f"{REPORT_DIR}/tables.tex",
        figures=report(
            directory(f"{REPORT_DIR}/figures"),
            patterns=["{figure}.png"],
            caption="../report/figure.rst",
            category=lambda wc: figure_category(wc.figure, CLAIM_CATEGORIES),
            subcategory=lambda wc: figure_subcategory(wc.figure),
            labels=lambda wc: {"figure": wc.figure},
        ),
        summary_html=report(
            f"{REPORT_DIR}/html/summary.html",
            caption="../report/summary.rst",
            category=SUMMARY_CATEGORY,
            labels={"page": "summary of the registry's claims"},
        ),
        companions_html=report(
            directory(f"{REPORT_DIR}/html/companions"),
            patterns=["{page}.html"],
            caption="../report/companion.rst",
            category=COMPANION_CATEGORY,
            labels=lambda wc: {"page": wc.page},
        ),
    log:
        f"{LOGS}/report/summary.log",
    benchmark:
        f"{BENCH}/report/summary.tsv"
    threads: 1
    resources:
        **resources_for("report"),
    script:
        "../scripts/report.py"
