#!/bin/bash
# A promise module (line-based protocol, action_policy) for the tests whose
# answers break the protocol's rules in the way its promiser names, so that
# the agent's complaints can be compared with cf-agent's.
read -r _header
read -r _empty
echo "misbehave 1.0.0 v1 line_based action_policy"
echo ""
operation="" promiser=""
while IFS= read -r line; do
  if [ -n "$line" ]; then
    case "$line" in
      operation=*) operation=${line#operation=} ;;
      promiser=*) promiser=${line#promiser=} ;;
    esac
    continue
  fi
  echo "operation=$operation"
  case "$operation:$promiser" in
    validate_promise:invalid_explained) echo "log_error=The promiser 'invalid_explained' is not valid here"; echo "result=invalid" ;;
    validate_promise:invalid_silent) echo "result=invalid" ;;
    validate_promise:validate_error) echo "log_critical=Something broke while validating"; echo "result=error" ;;
    validate_promise:*) echo "result=valid" ;;
    evaluate_promise:result_error) echo "log_critical=Something broke while evaluating"; echo "result=error" ;;
    evaluate_promise:result_weird) echo "result=maybe" ;;
    evaluate_promise:result_missing) echo "log_verbose=no result follows" ;;
    evaluate_promise:not_kept_silent) echo "result=not_kept" ;;
    evaluate_promise:not_kept_explained) echo "log_error=Could not do it"; echo "result=not_kept" ;;
    evaluate_promise:not_kept_warned) echo "log_warning=Should do it, but only warning promised"; echo "result=not_kept" ;;
    evaluate_promise:repaired_silent) echo "result=repaired" ;;
    evaluate_promise:kept_with_info) echo "log_info=Checked, nothing to do"; echo "result=kept" ;;
    evaluate_promise:levels)
      for l in critical error warning notice info verbose debug err crit warn inform; do
        echo "log_$l=a message at '$l'"
      done
      echo "log_info=a message with = signs = kept"
      echo "noequals"
      echo "log_noequals"
      echo "result_classes=odd-one,odd two,,odd.three"
      echo "result=kept" ;;
    evaluate_promise:duplicates)
      echo "result_classes=first_set"
      echo "result=repaired"
      echo "log_info=changed something"
      echo "result=kept"
      echo "result_classes=second_set_a,second_set_b" ;;
    terminate:*) echo "log_info=misbehave terminates"; echo "result=success"; echo ""; exit 0 ;;
  esac
  echo ""
  operation="" promiser=""
done
