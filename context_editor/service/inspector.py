"""placeholder"""
def mount(app, svc, caller):
    pass
