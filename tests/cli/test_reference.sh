#!/bin/sh
# The reference the flag tables make (tools/reference.h): docs/cli.md as
# committed is what the tables make now (else: `make reference`); the man
# pages render without a warning; the bash completion completes commands,
# flags, aliases and enumerated values, and file names for paths; the zsh
# completion parses.
. "$STOKE_TESTS/cli/lib.sh"
SRC="$STOKE_TESTS/.."
run 0 "$STOKE" help --markdown
cmp -s out.txt "$SRC/docs/cli.md" || {
    fail "docs/cli.md differs from what the flag tables make: run 'make reference' and commit it"
    diff "$SRC/docs/cli.md" out.txt | head -20 >&2
}
for c in $("$STOKE" help --commands); do
    grep -q "^## stoke $c\$" out.txt || fail "docs/cli.md has no section for stoke $c"
done

# man pages: one per command, every flag in it, no groff warning
run 0 "$STOKE" help --man train
cp out.txt stoke-train.1
for f in "\\\\-\\\\-batch" "\\\\-\\\\-image\\\\-size" "also \\\\-\\\\-batch\\\\-size" "\\\\-\\\\-quiet"; do
    grep -q "$f" stoke-train.1 || fail "stoke-train.1 lacks $f"
done
if command -v groff > /dev/null; then
    for c in "" $("$STOKE" help --commands); do
        # shellcheck disable=SC2086
        "$STOKE" help --man $c > page.1
        groff -man -Tutf8 -ww -z page.1 2> warn.txt
        [ -s warn.txt ] && { fail "man page of '$c': groff warns"; head -3 warn.txt >&2; }
    done
fi

# bash: the completion function, driven as bash drives it
run 0 "$STOKE" completion bash
cp out.txt stoke.bash
bash -n stoke.bash || fail "stoke.bash does not parse"
complete_words() { # the words bash offers for "stoke $*" (the last word being completed)
    bash -c '. ./stoke.bash; COMP_WORDS=(stoke "$@"); COMP_CWORD=$#; _stoke
             printf "%s\n" "${COMPREPLY[@]}"' bash "$@"
}
complete_words tr | grep -qx train || fail "bash: no 'train' for 'stoke tr'"
complete_words train --batch- | grep -qx -- --batch-size || fail "bash: no --batch-size"
complete_words train --opt | grep -qx -- --optimizer || fail "bash: no --optimizer"
complete_words train --model res | grep -qx resnet18 || fail "bash: no resnet18 for --model"
complete_words bench --order b | grep -qx block || fail "bash: no block for --order"
complete_words train --optimizer ada | sort | tr '\n' ' ' | grep -qx "adam adamw " ||
    fail "bash: --optimizer ada should give adam and adamw"
touch some.stoke
complete_words info som | grep -qx some.stoke || fail "bash: no file name for info's argument"
complete_words train --data som | grep -qx some.stoke || fail "bash: no file name for --data"
[ -z "$(complete_words train --batch 1)" ] || fail "bash: completed a number"
complete_words help tra | grep -qx transforms || fail "bash: no 'transforms' after help"

# zsh: the completion function parses (where zsh is installed)
run 0 "$STOKE" completion zsh
cp out.txt _stoke
expect _stoke "#compdef stoke"
expect _stoke "'(-b --batch --batch-size)'{-b,--batch,--batch-size}'[default 128]:B:'"
if command -v zsh > /dev/null; then
    zsh -n _stoke || fail "_stoke does not parse"
fi
run 2 "$STOKE" completion fish
expect err.txt "fish: expected bash or zsh"
finish
