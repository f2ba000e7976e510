int revive_fake_inject_marker = 1;
