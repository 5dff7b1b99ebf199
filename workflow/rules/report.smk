# C9 special-case check, one table per claim, and the summary with its figures.


rule special_case:
    output:
        f"{CHECKS_DIR}/special_case.json",
    log:
        f"{LOGS}/special_case.log",
    threads: 1
    resources:
        **resources_for("special_case"),
    params:
        cases=config["checks"]["cases"],
    script:
        "../scripts/special_case.py"


rule claim_table:
    input:
        table_inputs,
        claims=config["claims"],
    output:
        md=f"{REPORT_DIR}/table_{{cid}}.md",
        tex=f"{REPORT_DIR}/table_{{cid}}.tex",
    log:
        f"{LOGS}/report/table_{{cid}}.log",
    threads: 1
    resources:
        **resources_for("report"),
    script:
        "../scripts/claim_table.py"


rule report:
    input:
        report_inputs,
        claims=config["claims"],
        companions=[str(p) for p in companion_targets(config)],
    output:
        summary=f"{REPORT_DIR}/summary.md",
        claims_json=f"{REPORT_DIR}/claims.json",
        tables_tex=f"{REPORT_DIR}/tables.tex",
        figures=directory(f"{REPORT_DIR}/figures"),
    log:
        f"{LOGS}/report/summary.log",
    threads: 1
    resources:
        **resources_for("report"),
    script:
        "../scripts/report.py"
