# complete.zsh LINE completes LINE in an interactive zsh on a
# pseudo-terminal (zpty), with compinit and then
# `source <(dnsconfigurer completion zsh)`, and prints the matches of each
# compadd call as <<a|b|c>>. TestCompletionShells runs it.
zmodload zsh/zpty || exit 3
zpty z zsh -f -i
zpty -w z "PROMPT=''; unsetopt auto_list; autoload -U compinit; compinit -u -D"
# ^Xk clears the line. No key sent is special to the terminal (^U is):
# what is typed before zle takes the terminal reaches zle as typed.
zpty -w z "bindkey '^Xk' kill-whole-line"
zpty -w z 'source <(dnsconfigurer completion zsh)'
zpty -w z 'compadd() { local -a hits; builtin compadd -O hits "$@"; (( $#hits )) && print -r -- "<<${(j:|:)hits}>>" >/dev/tty; builtin compadd "$@"; }'
# The marks are split in the commands so that only their output matches.
zpty -w z "(( \$+_comps[dnsconfigurer] )) && print -r -- RE''ADY"
zpty -r z out '*READY*'
zpty -w -n z "$1"$'\t\C-xk'
zpty -w z "print -r -- DO''NE"
zpty -r z out '*DONE*'
print -r -- "$out"
zpty -d z
