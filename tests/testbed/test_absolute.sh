#!/usr/bin/env bash
# (h) --speeds absolute: each node is padded to its own time per sample of the model (the
# cluster file's figure) against this machine's, measured by `asteroid devices`; a device
# faster than this machine needs time dilation (auto raises it, a smaller fixed one is refused).
# Loopback nodes (--no-netns): needs neither root nor namespaces.
source "$(dirname "$0")/common.sh"

# Two devices, one needing twice the other's time per mlp sample. The figures are far above
# this machine's (an mlp sample takes microseconds here), so both are slowed down.
cat >"$tmp/slow.json" <<'JSON'
{"devices": [{"name": "a", "speed": 1, "memory": "1GiB", "seconds_per_sample": {"mlp": 0.002}},
             {"name": "b", "speed": 1, "memory": "1GiB", "seconds_per_sample": {"mlp": 0.004}}],
 "link_mbps": 100}
JSON
tb_run --no-netns --speeds absolute --model mlp --batch 32 --keep-logs "$tmp/logs" \
  --cluster "$tmp/slow.json" -- bash -c 'echo "D=$ASTEROID_TESTBED_DILATION"'
expect_status 0 "testbed (absolute speeds)"
expect_output "D=1$"
line=$(grep -o "absolute speeds: this machine .*" "$tmp/testbed.out") \
  || fail "no 'absolute speeds' line: $(cat "$tmp/testbed.out")"
read -r host_ms sa sb <<<"$(sed -E 's/.*this machine ([0-9.e+-]+) ms per mlp sample \(batch 32\); slowdowns ([0-9.e+-]+) ([0-9.e+-]+) .*/\1 \2 \3/' <<<"$line")"
say "this machine $host_ms ms per sample; slowdowns a $sa, b $sb"
# slowdown = the device's time per sample / this machine's (printed to 4 digits).
awk -v h="$host_ms" -v a="$sa" -v b="$sb" 'BEGIN {
      ea = 2 / h; eb = 4 / h
      exit !(a > 1 && (a - ea) / ea < 1e-3 && (ea - a) / ea < 1e-3 \
             && (b - eb) / eb < 1e-3 && (eb - b) / eb < 1e-3) }' \
  || fail "slowdowns $sa, $sb: want 2 ms and 4 ms over this machine's $host_ms ms"
# The nodes run with them (their logs print two decimals).
node_slowdowns=$(grep -ho "slowdown [0-9.]*" "$tmp"/logs/* | awk '{ print $2 }')
for want in "$sa" "$sb"; do
  awk -v w="$want" '{ d = $1 - w; if (d < 0) d = -d; if (d <= 0.006) found = 1 }
                    END { exit !found }' <<<"$node_slowdowns" \
    || fail "no node runs with slowdown $want: $(grep -h slowdown "$tmp"/logs/*)"
done
assert_clean "$tb_pid"

# A device far faster than this machine (1 us per mlp sample): refused at D = 1, dilated by auto.
jq '.devices[0].seconds_per_sample.mlp = 1e-6' "$tmp/slow.json" >"$tmp/fast.json"
status=0
out=$(bash "$testbed" --exe "$exe" --base-port "$port" --no-netns --speeds absolute --model mlp \
        --cluster "$tmp/fast.json" -- true 2>&1) || status=$?
(( status == 1 )) && grep -qE -- "--dilation 1: a device is faster than this machine for mlp; give --dilation [0-9.e+]+ or more, or auto" <<<"$out" \
  || fail "a faster device at D = 1: expected status 1 and the message, got $status: $out"
tb_run --no-netns --speeds absolute --model mlp --dilation auto --cluster "$tmp/fast.json" \
  -- bash -c 'echo "D=$ASTEROID_TESTBED_DILATION"'
expect_status 0 "testbed (faster device, --dilation auto)"
d=$(grep -oE "^D=[0-9.e+]+" "$tmp/testbed.out" | cut -d= -f2)
fast=$(grep -oE "slowdowns [0-9.e+-]+" "$tmp/testbed.out" | head -n 1 | cut -d' ' -f2)
awk -v d="$d" -v s="$fast" 'BEGIN { exit !(s < 1 && d * s >= 0.999) }' \
  || fail "D = $d with the fast device's slowdown $fast: want D x slowdown >= 1"
say "faster device: slowdown $fast, D = $d"
assert_clean "$tb_pid"

# Without a figure for the model the testbed says which device lacks one.
status=0
out=$(bash "$testbed" --exe "$exe" --base-port "$port" --no-netns --speeds absolute \
        --model cnn --cluster "$tmp/slow.json" -- true 2>&1) || status=$?
(( status == 1 )) && grep -qE 'device a (\(custom\) )?has no seconds_per_sample for model "cnn"' <<<"$out" \
  || fail "a model without figures: expected status 1 naming device a, got $status: $out"
# A job whose input contradicts the catalog's figures (ResNet-50's are for 3x224x224) is
# refused before this machine is measured or a node starts, naming the option.
cat >"$tmp/resnet50-32.json" <<'JSON'
{"model": "resnet50", "model_options": {"image_size": 32, "num_classes": 100}, "batch_size": 8}
JSON
status=0
out=$(bash "$testbed" --exe "$exe" --base-port "$port" --no-netns --speeds absolute \
        --cluster "$root/examples/clusters/env-a-100mbps.json" --job "$tmp/resnet50-32.json" \
        2>&1) || status=$?
(( status == 1 )) && grep -q 'jetson-nano catalog entry, which is for the model options {"image_size":224,"num_classes":100}.*differ in "image_size"' <<<"$out" \
  || fail "a 32x32 ResNet-50 job against the catalog's 224x224 figures: expected status 1 and the message, got $status: $out"
say "PASS"
