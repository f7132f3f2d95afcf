#!/bin/bash
# churn.sh SECS: a build machine's churn for SECS seconds: gcc, the program it built, python3 and perl
# starting and exiting, about three processes a second.
mkdir -p ${CHURN_DIR:-/tmp/pp-churn} && cd ${CHURN_DIR:-/tmp/pp-churn}
cat > c.c <<'C'
#include <stdio.h>
static int f(int n){int s=0;for(int i=0;i<n;i++)s+=i*i%7;return s;}
int main(void){printf("%d\n",f(1000000));return 0;}
C
end=$(( $(date +%s) + $1 ))
while [ $(date +%s) -lt $end ]; do
  gcc -O2 -g -o c c.c && ./c >/dev/null
  python3 -c 'import json,re; print(sum(len(json.dumps(list(range(i)))) for i in range(300)))' >/dev/null
  perl -e 'my $s=0; $s+=length(join(",",1..$_)) for 1..300; print "$s\n"' >/dev/null
  sleep 0.3
done
