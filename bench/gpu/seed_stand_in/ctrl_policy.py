"""Stand-in for the seed's `ctrl_policy` module (not part of the seed): bt_prompt renders exactly the text of
bench/gpu/prompt.jinja, the template rlloop is given in the same benchmark, so both trainers see the same rows."""


def bt_prompt(name, memory=None):
    text = f"Target: {name}\n"
    if memory:
        text += f"Memory: {memory[0]} {memory[1]}\n"
    return text + "Write the behaviour code for the robot arm."
