# Shared by the fake package managers of tests/it/vendored_modules.rs
# (sourced with S set to the fixture's directory). What is "installed" is
# $S/installed and what the repositories hold is $S/repo, one
# "name version arch" a line; a package file holds one such line. Every
# call of a fake command is added to $S/protocol, between the module's
# requests and answers that the logging wrapper writes there.

say() { echo "  \$ $(basename "$0") $*" >> "$S/protocol"; }

list() { cat "$S/installed"; }

# The newest version of a package in the repository.
newest() { awk -v n="$1" '$1 == n { print $2 }' "$S/repo" | sort -V | tail -n 1; }

# Installs one "name version arch" line, replacing the package's version.
put() {
  set -- $1
  awk -v n="$1" '$1 != n' "$S/installed" > "$S/installed.new"
  echo "$1 $2 $3" >> "$S/installed.new"
  sort "$S/installed.new" > "$S/installed"
  rm -f "$S/installed.new"
}

# Installs NAME [VERSION] from the repository (the newest without VERSION).
add() {
  v=${2:-$(newest "$1")}
  line=$(awk -v n="$1" -v v="$v" '$1 == n && $2 == v' "$S/repo" | head -n 1)
  [ -n "$line" ] || { echo "no package $1 $2 in the repository" >&2; return 1; }
  put "$line"
}

# Installs a package file.
add_file() {
  [ -f "$1" ] || { echo "no package file $1" >&2; return 1; }
  put "$(head -n 1 "$1")"
}

# Installs a package named as package managers write it: name, name-version,
# name-version.arch, name.arch, name=version, name.arch=version.
add_spec() {
  line=$(awk -v s="$1" '$1"-"$2 == s || $1"-"$2"."$3 == s || $1"="$2 == s || $1"."$3"="$2 == s' \
    "$S/repo" | head -n 1)
  if [ -n "$line" ]; then put "$line"; return; fi
  n=$(awk -v s="$1" '$1 == s || $1"."$3 == s { print $1; exit }' "$S/repo")
  [ -n "$n" ] || { echo "no package $1 in the repository" >&2; return 1; }
  add "$n"
}

# Removes a package named as add_spec takes it.
del_spec() {
  n=$(awk -v s="$1" '$1 == s || $1"-"$2 == s || $1"-"$2"."$3 == s || $1"."$3 == s || $1"="$2 == s { print $1; exit }' \
    "$S/installed")
  [ -n "$n" ] || { echo "$1 is not installed" >&2; return 1; }
  awk -v n="$n" '$1 != n' "$S/installed" > "$S/installed.new"
  mv "$S/installed.new" "$S/installed"
}

# "name new-version arch old-version" of each installed package that has a
# newer version in the repository.
updates() {
  while read -r n v a; do
    u=$(newest "$n")
    if [ -n "$u" ] && [ "$u" != "$v" ] && [ "$(printf '%s\n%s\n' "$v" "$u" | sort -V | tail -n 1)" = "$u" ]; then
      echo "$n $u $a $v"
    fi
  done < "$S/installed"
}
