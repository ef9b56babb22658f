/*
 * fault_check HISTORY_FILE...: re-checks saved histories (what a failing
 * fault run leaves behind) and prints every violation. Exit 0 when every
 * history is valid, 1 when one is not, 2 when a file cannot be read.
 */
#include <stdio.h>
#include <string.h>

#include "history.h"

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: fault_check HISTORY_FILE...\n");
        return 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        fh_history h;
        fh_init(&h);
        if (!fh_load(&h, argv[i])) {
            fh_free(&h);
            return 2;
        }
        fh_report r;
        bool ok = fh_check(&h, stdout, &r);
        printf("%s: %zu operations on %zu keys checked: %zu keys violated (%zu anomalies), %zu inconclusive: %s\n",
               argv[i], r.ops_checked, r.keys, r.violations, r.anomalies, r.inconclusive, ok ? "valid" : "NOT VALID");
        if (!ok) rc = 1;
        fh_free(&h);
    }
    return rc;
}
