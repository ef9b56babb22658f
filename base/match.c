/*
 * Glob matching exactly as Redis 7.0's stringmatchlen (util.c), for KEYS and
 * SCAN MATCH: `*`, `?`, `[...]` with `^` negation, `a-z` ranges (either
 * order) and `\` escapes inside and outside a class; a class left open at
 * the end of the pattern matches its last byte as Redis does.  Bytes are
 * compared as signed chars, as Redis's `char` on x86.  A `*` with no match
 * for the rest of the pattern anywhere stops every earlier `*` from trying
 * longer matches (Redis 7.0.9's skipLongerMatches), so no pattern costs
 * more than O(pattern x string).  Unlike 7.0 (like 7.2), more than 1000
 * nested `*` match nothing rather than exhaust the stack.
 */
#include <ctype.h>

#include "base/base.h"

static int match_impl(const char *pattern, long patternLen, const char *string, long stringLen, int nocase,
                      int *skipLonger, int nesting)
{
    /* Each '*' recurses: a pattern of a million of them would overflow the
     * (data thread's) stack.  Deeper than 1000 is no match, as Redis 7.2+. */
    if (nesting > 1000) return 0;
    while (patternLen && stringLen) {
        switch (pattern[0]) {
        case '*':
            while (patternLen && pattern[1] == '*') {
                pattern++;
                patternLen--;
            }
            if (patternLen == 1) return 1;
            while (stringLen) {
                if (match_impl(pattern + 1, patternLen - 1, string, stringLen, nocase, skipLonger, nesting + 1)) return 1;
                if (*skipLonger) return 0;
                string++;
                stringLen--;
            }
            *skipLonger = 1;
            return 0;
        case '?':
            string++;
            stringLen--;
            break;
        case '[': {
            int not, match;
            pattern++;
            patternLen--;
            not = pattern[0] == '^';
            if (not) {
                pattern++;
                patternLen--;
            }
            match = 0;
            for (;;) {
                if (pattern[0] == '\\' && patternLen >= 2) {
                    pattern++;
                    patternLen--;
                    if (pattern[0] == string[0]) match = 1;
                } else if (pattern[0] == ']') {
                    break;
                } else if (patternLen == 0) {
                    pattern--;
                    patternLen++;
                    break;
                } else if (patternLen >= 3 && pattern[1] == '-') {
                    int start = pattern[0], end = pattern[2], c = string[0];
                    if (start > end) {
                        int t = start;
                        start = end;
                        end = t;
                    }
                    if (nocase) {
                        start = tolower(start);
                        end = tolower(end);
                        c = tolower(c);
                    }
                    pattern += 2;
                    patternLen -= 2;
                    if (c >= start && c <= end) match = 1;
                } else if (!nocase) {
                    if (pattern[0] == string[0]) match = 1;
                } else if (tolower((int)pattern[0]) == tolower((int)string[0])) {
                    match = 1;
                }
                pattern++;
                patternLen--;
            }
            if (not) match = !match;
            if (!match) return 0;
            string++;
            stringLen--;
            break;
        }
        case '\\':
            if (patternLen >= 2) {
                pattern++;
                patternLen--;
            }
            /* fall through */
        default:
            if (!nocase) {
                if (pattern[0] != string[0]) return 0;
            } else if (tolower((int)pattern[0]) != tolower((int)string[0])) {
                return 0;
            }
            string++;
            stringLen--;
            break;
        }
        pattern++;
        patternLen--;
        if (stringLen == 0) {
            while (*pattern == '*') {
                pattern++;
                patternLen--;
            }
            break;
        }
    }
    return patternLen == 0 && stringLen == 0;
}

int lt_glob_match(const char *pattern, size_t plen, const char *s, size_t slen, int nocase)
{
    int skip = 0;
    return match_impl(pattern, (long)plen, s, (long)slen, nocase, &skip, 0);
}
