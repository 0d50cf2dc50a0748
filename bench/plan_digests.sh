#!/usr/bin/env bash
# Digests of the plans every rematerialization planner makes, to show that a
# change to a planner's code leaves its plans as they were: run it with the
# `memplan` built before the change and with the one built after, and compare
# the two tables (`diff`, or `bench/plan_digests.sh --compare OLD NEW`).
#
# Graphs: the zoo's training graphs at their default sizes (MONeT's batch
# sizes for the CNNs) and three random layered DAGs without a backward part.
# Budgets: 50 % and 33 % of each graph's store-all arena, and MONeT's
# operating point (store-all / MONeT's memory factor) for its five models.
#
# A plan is compared by the SHA-256 of its plan JSON. A run that used its
# whole time limit may have been cut short at a different point of the search
# in the two runs; such rows carry `timed` and are compared by status, arena
# and cost only by the reader.
#
# Usage: bench/plan_digests.sh MEMPLAN OUT.tsv [--time-limit S] [--planners a,b] [--graphs a,b]
#        bench/plan_digests.sh --compare OLD.tsv NEW.tsv
set -euo pipefail

if [ "${1:-}" = --compare ]; then
  [ $# -eq 3 ] || { echo "usage: $0 --compare OLD.tsv NEW.tsv" >&2; exit 2; }
  # Joins the two tables on (graph, planner, budget) and prints one verdict per row.
  join -t $'\t' <(awk -F'\t' 'NR>1{print $1"/"$2"/"$3"\t"$4"\t"$7"\t"$8}' "$2" | sort) \
                <(awk -F'\t' 'NR>1{print $1"/"$2"/"$3"\t"$4"\t"$7"\t"$8}' "$3" | sort) |
    awk -F'\t' '{ v = ($4 == $7) ? "identical" : (($3 == "timed" || $6 == "timed") ? "differs (timed)" : "DIFFERS");
                  n[v]++; if (v != "identical") print v "\t" $1 }
                END { for (k in n) print k ": " n[k] > "/dev/stderr"; exit ("DIFFERS" in n) }'
  exit $?
fi

[ $# -ge 2 ] || { echo "usage: $0 MEMPLAN OUT.tsv [--time-limit S] [--planners a,b] [--graphs a,b]" >&2; exit 2; }
memplan=$(realpath "$1"); out=$2; shift 2
time_limit=30
planners="auto joint checkmate chain_dp block_dp chen_greedy sqrt_n store_all"
graphs="resnet18 resnet50 vgg16 mobilenet_v2 unet googlenet bert_base gpt2 random_layered:1 random_layered:2 random_layered:3"
while [ $# -gt 0 ]; do
  case "$1" in
    --time-limit) time_limit=$2; shift 2 ;;
    --planners) planners=${2//,/ }; shift 2 ;;
    --graphs) graphs=${2//,/ }; shift 2 ;;
    *) echo "$0: unknown option $1" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# MONeT's memory factors (store-all / MONeT's memory; bench/solver_remat_monet.cpp).
monet_budget() {
  case "$1" in
    resnet50) echo 33.11% ;; googlenet) echo 33.44% ;; unet) echo 34.97% ;;
    mobilenet_v2) echo 34.60% ;; vgg16) echo 39.06% ;; *) echo "" ;;
  esac
}
printf 'graph\tplanner\tbudget\tstatus\tarena\tseconds\ttimed\tsha256\n' > "$out"
for gspec in $graphs; do
  name=${gspec%%:*}
  if [ "$name" = random_layered ]; then
    seed=${gspec#*:}; gfile=$work/rl$seed.json; label=random_layered:$seed
    "$memplan" zoo random_layered --nodes 100 --seed "$seed" -o "$gfile" > /dev/null
  else
    gfile=$work/$name.json; label=$name
    "$memplan" zoo "$name" -o "$gfile" > /dev/null
  fi
  for budget in 50% 33% $(monet_budget "$name"); do
    for p in $planners; do
      plan=$work/plan.json; rm -f "$plan"
      start=$(date +%s.%N)
      set +e
      "$memplan" plan "$gfile" --budget "$budget" --remat "$p" --time-limit "$time_limit" --json -o "$plan" > "$work/report.json" 2> "$work/err"
      rc=$?
      set -e
      secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')
      timed=$(awk -v s="$secs" -v l="$time_limit" 'BEGIN{print (s >= 0.9*l) ? "timed" : "-"}')
      if [ -s "$plan" ]; then
        sha=$(sha256sum "$plan" | cut -c1-16)
        arena=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["arena"])' "$work/report.json" 2>/dev/null || echo ?)
        status=fits
      else
        sha=none; arena=-; status="rc$rc"
      fi
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$p" "$budget" "$status" "$arena" "$secs" "$timed" "$sha" | tee -a "$out"
    done
  done
done
