/*
 * fault_check HISTORY_FILE...: re-checks saved histories (what a failing
 * fault run leaves behind) and prints every violation; with --txn, the
 * files are list-append transaction histories (txn.txt). Exit 0 when every
 * history is valid, 1 when one is not, 2 when a file cannot be read.
 */
#include <stdio.h>
#include <string.h>

#include "history.h"
#include "txn.h"

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: fault_check HISTORY_FILE...\n       fault_check --txn TXN_HISTORY_FILE...\n");
        return 2;
    }
    int rc = 0;
    if (!strcmp(argv[1], "--txn")) {
        for (int i = 2; i < argc; i++) {
            tx_history h;
            tx_init(&h);
            if (!tx_load(&h, argv[i])) {
                tx_free(&h);
                return 2;
            }
            tx_report r;
            bool ok = tx_check(&h, stdout, &r);
            printf("%s: %zu transactions (%zu committed, %zu failed, %zu unknown) on %zu keys, %zu dependencies: %zu "
                   "anomalies: %s\n",
                   argv[i], r.ok + r.failed + r.unknown, r.ok, r.failed, r.unknown, r.keys, r.edges, r.anomalies,
                   ok ? "strictly serializable" : "NOT VALID");
            if (!ok) rc = 1;
            tx_free(&h);
        }
        return rc;
    }
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
