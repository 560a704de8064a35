print("story")
