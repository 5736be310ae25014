"""aclcap capture: trace, capture per size, replay and compare with eager."""
