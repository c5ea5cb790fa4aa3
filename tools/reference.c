/* The reference the flag tables make (reference.h): Markdown, man pages,
 * bash and zsh completion, each walking the same tables as --help. */
#include "tools/reference.h"

#include "tools/flags.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- the tables, walked --------------------------------------------------------- */

/* Every flag of c: its table, then the first argument's names, then the
 * flags every command takes. A first argument's name has no entry of its
 * own: fn gets NULL and the name. */
typedef void (*flag_fn)(FILE *f, const stk_flag *fl, const char *first_arg, void *ctx);

static void each_flag(const stk_command *c, FILE *f, flag_fn fn, void *ctx)
{
    for (const stk_flag *fl = c->cli->flags; fl->kind != STK_FLAG_KIND_END; fl++)
        if (fl->kind != STK_FLAG_KIND_SECTION) fn(f, fl, NULL, ctx);
    for (int i = 0; c->cli->first_arg_names && c->cli->first_arg_names[i]; i++)
        fn(f, NULL, c->cli->first_arg_names[i], ctx);
    for (const stk_flag *fl = stk_cli_common_flags; fl->kind != STK_FLAG_KIND_END; fl++)
        if (fl->kind != STK_FLAG_KIND_SECTION) fn(f, fl, NULL, ctx);
}

static bool takes_value(const stk_flag *fl)
{
    return !fl || fl->kind != STK_FLAG_KIND_BOOL || fl->optional_value;
}

/* A value that names a file or folder (completed as one). */
static bool names_a_path(const stk_flag *fl)
{
    if (!fl) return true;
    const char *a = fl->arg ? fl->arg : "";
    return fl->kind == STK_FLAG_KIND_TEXT || fl->kind == STK_FLAG_KIND_LIST || fl->optional_value
               ? strstr(a, "PATH") || strstr(a, "FILE") || strstr(a, "DIR") ||
                     strstr(a, "CHECKPOINT") || strstr(a, ".stoke")
               : false;
}

/* The words a value is one of (choices, or the table's list), or NULL. */
static const char *const *value_words(const stk_flag *fl)
{
    if (!fl) return NULL;
    if (fl->kind == STK_FLAG_KIND_CHOICE) return fl->choices;
    if (fl->values) return fl->values();
    return NULL;
}

/* ---- the overview: `stoke help` ------------------------------------------------------ */

void stk_reference_overview(FILE *f, const stk_command *const *cmds, int n_cmds)
{
    fprintf(f,
            "stoke %s: a training framework whose data pipeline keeps the accelerator fed\n\n"
            "usage: stoke COMMAND [ARGS]\n\ncommands:\n",
            STOKE_VERSION);
    for (int i = 0; i < n_cmds; i++) fprintf(f, "  %-8s %s\n", cmds[i]->name, cmds[i]->summary);
    fprintf(f, "  %-8s %s\n", "help",
            "this list; `stoke help COMMAND` for one command, `stoke help transforms`\n"
            "           for the transform grammar (--transform)");
    fprintf(
        f,
        "\noptions:\n  --version      print the version\n  -h, --help     this text\n"
        "\nevery command also takes:\n"
        "  -q, --quiet    no progress bars or notes: results, warnings and errors only\n"
        "  -v, --verbose  debug detail on stderr\n"
        "\nenvironment:\n  STOKE_LOG=debug|info|warn|error   how much to log (default info)\n"
        "  STOKE_PROGRESS=tty|plain|off      progress bar style (default: tty when stderr is one)\n"
        "\nexit status: 0 ok, 1 bad input or runtime error, 2 bad usage, 130 interrupted\n"
        "(Ctrl-C: what was written so far is kept; --resume continues a run or a sweep)\n");
}

/* ---- Markdown: docs/cli.md ------------------------------------------------------- */

void stk_reference_markdown(FILE *f, const stk_command *const *cmds, int n_cmds)
{
    fputs("<!-- Made by `stoke help --markdown` from the flag tables: do not edit by hand.\n"
          "     ctest's cli_reference fails when this file differs from what they make;\n"
          "     `make reference` writes it again. -->\n"
          "# The command line\n\n"
          "Every command, with its `--help`. The same text is in the man pages\n"
          "(`man stoke-train`) and drives the shell completion (`stoke completion bash`).\n\n"
          "| command | what it does |\n| --- | --- |\n",
          f);
    for (int i = 0; i < n_cmds; i++)
        fprintf(f, "| [`stoke %s`](#stoke-%s) | %s |\n", cmds[i]->name, cmds[i]->name,
                cmds[i]->summary);
    fputs("| [`stoke help transforms`](#stoke-help-transforms) | the transform grammar |\n\n"
          "## stoke\n\n```\n",
          f);
    stk_reference_overview(f, cmds, n_cmds);
    fputs("```\n", f);
    for (int i = 0; i < n_cmds; i++) {
        fprintf(f, "\n## stoke %s\n\n%s.\n\n```\n", cmds[i]->name, cmds[i]->summary);
        stk_cli_help(cmds[i]->cli, f);
        fputs("```\n", f);
    }
    fprintf(f, "\n## stoke help transforms\n\n```\n%s```\n", stk_transform_help);
}

/* ---- man pages -------------------------------------------------------------------- */

/* n bytes of s as roff text: '-' and '\' escaped, a line's leading '.' or '\'' guarded. */
static void roff(FILE *f, const char *s, size_t n)
{
    bool line_start = true;
    for (size_t i = 0; i < n && s[i]; i++) {
        char c = s[i];
        if (line_start && (c == '.' || c == '\'')) fputs("\\&", f);
        if (c == '\\')
            fputs("\\e", f);
        else if (c == '-')
            fputs("\\-", f);
        else
            fputc(c, f);
        line_start = c == '\n';
    }
}

static void roff_all(FILE *f, const char *s) { roff(f, s, strlen(s)); }

/* Text kept as laid out (its columns and lists): a no-fill block. */
static void roff_block(FILE *f, const char *s)
{
    fputs(".nf\n", f);
    roff_all(f, s);
    if (*s && s[strlen(s) - 1] != '\n') fputc('\n', f);
    fputs(".fi\n", f);
}

static void man_flag(FILE *f, const stk_flag *fl, const char *first_arg, void *ctx)
{
    (void)ctx;
    fputs(".TP\n", f);
    if (!fl) {
        fputs("\\fB\\-\\-", f);
        roff_all(f, first_arg);
        fputs("\\fR \\fIPATH\\fR\nthe same as giving it as the first argument\n", f);
        return;
    }
    if (fl->letter) fprintf(f, "\\fB\\-%c\\fR, ", fl->letter);
    fputs("\\fB\\-\\-", f);
    roff_all(f, fl->name);
    fputs("\\fR", f);
    if (fl->arg) {
        fputs(" \\fI", f);
        roff_all(f, fl->arg);
        fputs("\\fR", f);
    }
    fputc('\n', f);
    /* the help as --help lays it out (its lists and columns) */
    roff_block(f, fl->help ? fl->help : "");
    if (fl->alias[0]) {
        fputs("also", f);
        for (int i = 0; i < 3 && fl->alias[i]; i++) {
            fputs(i ? ", \\-\\-" : " \\-\\-", f);
            roff_all(f, fl->alias[i]);
        }
        fputc('\n', f);
    }
}

static void man_header(FILE *f, const char *title, const char *name, const char *summary)
{
    fprintf(f,
            ".\\\" Made by `stoke help --man` from the flag tables.\n"
            ".TH %s 1 \"\" \"stoke %s\" \"Stoke manual\"\n.SH NAME\n",
            title, STOKE_VERSION);
    roff_all(f, name);
    fputs(" \\- ", f);
    roff_all(f, summary);
    fputc('\n', f);
}

static const char exit_status[] =
    "0: done; 1: bad input or a runtime error (the message names the file, record or flag);\n"
    "2: bad usage; 130: interrupted by Ctrl\\-C (what was written so far is kept).\n";

static void man_command(FILE *f, const stk_command *c)
{
    char title[64], name[64];
    snprintf(name, sizeof name, "stoke-%s", c->name);
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof title; i++)
        title[i] = name[i] >= 'a' && name[i] <= 'z' ? (char)(name[i] - 'a' + 'A') : name[i];
    title[i] = '\0';
    man_header(f, title, name, c->summary);
    fputs(".SH SYNOPSIS\n", f);
    roff_block(f, c->cli->usage);
    if (c->cli->about) {
        fputs(".SH DESCRIPTION\n", f);
        roff_block(f, c->cli->about);
    }
    fputs(".SH OPTIONS\n", f);
    for (const stk_flag *fl = c->cli->flags; fl->kind != STK_FLAG_KIND_END; fl++) {
        if (fl->kind == STK_FLAG_KIND_SECTION) {
            fputs(".SS ", f);
            roff_all(f, fl->name);
            fputc('\n', f);
        } else {
            man_flag(f, fl, NULL, NULL);
        }
    }
    if (c->cli->first_arg_names) {
        fputs(".SS the first argument by name\n", f);
        for (int k = 0; c->cli->first_arg_names[k]; k++)
            man_flag(f, NULL, c->cli->first_arg_names[k], NULL);
    }
    fputs(".SS every command\n", f);
    for (const stk_flag *fl = stk_cli_common_flags; fl->kind != STK_FLAG_KIND_END; fl++)
        if (fl->kind != STK_FLAG_KIND_SECTION) man_flag(f, fl, NULL, NULL);
    if (c->cli->notes) {
        fputs(".SH NOTES\n", f);
        roff_block(f, c->cli->notes);
    }
    fprintf(f, ".SH EXIT STATUS\n%s.SH SEE ALSO\n\\fBstoke\\fR(1)\n", exit_status);
}

static void man_overview(FILE *f, const stk_command *const *cmds, int n_cmds)
{
    man_header(f, "STOKE", "stoke",
               "a training framework whose data pipeline keeps the accelerator fed");
    fputs(".SH SYNOPSIS\n\\fBstoke\\fR \\fICOMMAND\\fR [\\fIARGS\\fR]\n.SH COMMANDS\n", f);
    for (int i = 0; i < n_cmds; i++) {
        fprintf(f, ".TP\n\\fBstoke %s\\fR\n", cmds[i]->name);
        roff_all(f, cmds[i]->summary);
        fprintf(f, "; \\fBstoke\\-%s\\fR(1)\n", cmds[i]->name);
    }
    fputs(".SH OVERVIEW\n", f);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (m) {
        stk_reference_overview(m, cmds, n_cmds);
        fclose(m);
        roff_block(f, text ? text : "");
    }
    free(text);
    fputs(".SH TRANSFORMS\n", f);
    roff_block(f, stk_transform_help);
    fprintf(f, ".SH EXIT STATUS\n%s", exit_status);
}

void stk_reference_man(FILE *f, const stk_command *c, const stk_command *const *cmds, int n_cmds)
{
    if (c)
        man_command(f, c);
    else
        man_overview(f, cmds, n_cmds);
}

/* ---- bash ------------------------------------------------------------------------- */

/* "--batch|--batch-size|-b" */
static void bash_names(FILE *f, const stk_flag *fl, const char *first_arg)
{
    if (!fl) {
        fprintf(f, "--%s", first_arg);
        return;
    }
    fprintf(f, "--%s", fl->name);
    for (int i = 0; i < 3 && fl->alias[i]; i++) fprintf(f, "|--%s", fl->alias[i]);
    if (fl->old) fprintf(f, "|--%s", fl->old);
    if (fl->letter) fprintf(f, "|-%c", fl->letter);
}

static void bash_value_case(FILE *f, const stk_flag *fl, const char *first_arg, void *ctx)
{
    (void)ctx;
    if (!takes_value(fl)) return;
    const char *const *words = value_words(fl);
    fputs("        ", f);
    bash_names(f, fl, first_arg);
    if (words) {
        fputs(") COMPREPLY=($(compgen -W \"", f);
        for (int i = 0; words[i]; i++) fprintf(f, "%s%s", i ? " " : "", words[i]);
        fprintf(f, "\" -- \"$cur\")%s); return ;;\n",
                fl && fl->values
                    ? " $(compgen -f -X '!*.onnx' -- \"$cur\") $(compgen -d -- \"$cur\")"
                    : "");
    } else if (names_a_path(fl)) {
        fputs(") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", f);
    } else {
        fputs(") return ;; # a number or a spec\n", f);
    }
}

static void bash_word(FILE *f, const stk_flag *fl, const char *first_arg, void *ctx)
{
    (void)ctx;
    if (!fl) {
        fprintf(f, " --%s", first_arg);
        return;
    }
    fprintf(f, " --%s", fl->name);
    for (int i = 0; i < 3 && fl->alias[i]; i++) fprintf(f, " --%s", fl->alias[i]);
    if (fl->letter) fprintf(f, " -%c", fl->letter);
}

void stk_reference_bash(FILE *f, const stk_command *const *cmds, int n_cmds)
{
    fputs("# bash completion for stoke, made by `stoke completion bash` from its flag tables.\n"
          "# Installed in share/bash-completion/completions; or: source <(stoke completion bash)\n"
          "_stoke() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
          "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
          "        COMPREPLY=($(compgen -W \"",
          f);
    for (int i = 0; i < n_cmds; i++) fprintf(f, "%s ", cmds[i]->name);
    fputs("help --help --version\" -- \"$cur\"))\n"
          "        return\n"
          "    fi\n"
          "    case ${COMP_WORDS[1]} in\n",
          f);
    for (int i = 0; i < n_cmds; i++) {
        const stk_command *c = cmds[i];
        fprintf(f, "    %s)\n        case $prev in\n", c->name);
        each_flag(c, f, bash_value_case, NULL);
        fputs("        esac\n"
              "        if [[ $cur == -* ]]; then\n"
              "            COMPREPLY=($(compgen -W \"--help",
              f);
        each_flag(c, f, bash_word, NULL);
        fputs("\" -- \"$cur\"))\n"
              "        else\n"
              "            COMPREPLY=($(compgen -f -- \"$cur\"))\n"
              "        fi ;;\n",
              f);
    }
    fputs("    help)\n        COMPREPLY=($(compgen -W \"", f);
    for (int i = 0; i < n_cmds; i++) fprintf(f, "%s ", cmds[i]->name);
    fputs("transforms\" -- \"$cur\")) ;;\n"
          "    esac\n"
          "}\n"
          "complete -o filenames -F _stoke stoke\n",
          f);
}

/* ---- zsh -------------------------------------------------------------------------- */

/* s up to its first newline, for a zsh spec's [description] inside single quotes. */
static void zsh_text(FILE *f, const char *s, const char *also_escape)
{
    for (; *s && *s != '\n'; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else if (strchr(also_escape, *s))
            fprintf(f, "\\%c", *s);
        else
            fputc(*s, f);
    }
}

static void zsh_spec(FILE *f, const stk_flag *fl, const char *first_arg, void *ctx)
{
    (void)ctx;
    fputs("        '", f);
    if (!fl) {
        fprintf(f, "--%s[the first argument, by name]:PATH:_files' \\\n", first_arg);
        return;
    }
    bool many = fl->alias[0] || fl->letter;
    if (fl->kind == STK_FLAG_KIND_LIST) fputc('*', f);
    if (many) { /* '(-b --batch --batch-size)'{-b,--batch,--batch-size}'[...]' */
        if (fl->kind != STK_FLAG_KIND_LIST) {
            fputc('(', f);
            if (fl->letter) fprintf(f, "-%c ", fl->letter);
            fprintf(f, "--%s", fl->name);
            for (int i = 0; i < 3 && fl->alias[i]; i++) fprintf(f, " --%s", fl->alias[i]);
            fputc(')', f);
        }
        fputs("'{", f);
        if (fl->letter) fprintf(f, "-%c,", fl->letter);
        fprintf(f, "--%s", fl->name);
        for (int i = 0; i < 3 && fl->alias[i]; i++) fprintf(f, ",--%s", fl->alias[i]);
        fputs("}'", f);
    } else {
        fprintf(f, "--%s", fl->name);
    }
    fputc('[', f);
    zsh_text(f, fl->help ? fl->help : "", "[]");
    fputc(']', f);
    if (takes_value(fl)) {
        if (fl->optional_value) fputc(':', f); /* an optional value: '::' */
        fputc(':', f);
        zsh_text(f, fl->arg ? fl->arg : "VALUE", ":");
        fputc(':', f);
        const char *const *words = value_words(fl);
        if (words) {
            fputc('(', f);
            for (int i = 0; words[i]; i++) fprintf(f, "%s%s", i ? " " : "", words[i]);
            fputc(')', f);
        } else if (names_a_path(fl)) {
            fputs("_files", f);
        }
    }
    fputs("' \\\n", f);
}

void stk_reference_zsh(FILE *f, const stk_command *const *cmds, int n_cmds)
{
    fputs("#compdef stoke\n"
          "# zsh completion for stoke, made by `stoke completion zsh` from its flag tables.\n"
          "# Installed as share/zsh/site-functions/_stoke.\n"
          "_stoke() {\n"
          "    local -a commands\n"
          "    commands=(\n",
          f);
    for (int i = 0; i < n_cmds; i++) {
        fprintf(f, "        '%s:", cmds[i]->name);
        zsh_text(f, cmds[i]->summary, ":");
        fputs("'\n", f);
    }
    fputs("        'help:a command'\\''s help, or the transform grammar'\n"
          "    )\n"
          "    if (( CURRENT == 2 )); then\n"
          "        _describe 'command' commands\n"
          "        return\n"
          "    fi\n"
          "    local cmd=$words[2]\n"
          "    shift words\n"
          "    (( CURRENT-- ))\n"
          "    case $cmd in\n",
          f);
    for (int i = 0; i < n_cmds; i++) {
        const stk_command *c = cmds[i];
        fprintf(f, "    %s)\n        _arguments -s -S \\\n", c->name);
        each_flag(c, f, zsh_spec, NULL);
        fputs(c->cli->max_args ? "        '*:argument:_files' ;;\n" : "        ;;\n", f);
    }
    fputs("    help)\n        _values 'topic' transforms", f);
    for (int i = 0; i < n_cmds; i++) fprintf(f, " %s", cmds[i]->name);
    fputs(" ;;\n    esac\n}\n_stoke \"$@\"\n", f);
}
